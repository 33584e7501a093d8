from hbtui.cli import program

program()
