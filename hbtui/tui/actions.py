"""Every key of the dashboard, in one table that knows nothing of Textual.

Each `Action` is one thing a key does, where it does it, and what it is
called: its id (the `[keymap]` name a user remaps it by), its default keys,
the Textual action it runs (on the feature that owns it), its scope (the main screen, the box table, the
log, the port grid), and its label, title and help. From this one table
come the bindings of each scope (`hbtui.tui.keys.bindings`), the command
palette, the help screen, the `:` command line, the `[keymap]` check and
what `hbtui config show` says of it. A key is bound once in a scope; a
widget's key shadows the screen's while that widget has the focus (in the
log, `n` is the next match, not a new box).
"""

from __future__ import annotations

from dataclasses import dataclass

MAIN = "main"  # the main screen: wherever the focus is on it, unless a widget has the key
TABLE = "table"  # the box table, while it has the focus
LOG = "log"  # the log, while it has the focus
PORTS = "ports"  # the port allocator's grid, while it has the focus
DIFF = "diff"  # the diff view of a box's work
TRY = "try"  # the compare view of a try's boxes

# The App's features, each an action namespace (hbtui/tui/feature.py): "boxes.start" runs
# `action_start` of the App's `boxes`.
FEATURES = ("boxes", "archives", "agents", "work", "shell")

SCOPE_NAMES = {
    MAIN: "",
    TABLE: "in the table",
    LOG: "in a log",
    PORTS: "in the port grid",
    DIFF: "in the diff view",
    TRY: "in the compare view",
}


@dataclass(frozen=True)
class Action:
    id: str  # the [keymap] name
    keys: str  # the default keys, comma-separated, as Textual names them
    # What it runs: "F.X" on the feature F the App composes (FEATURES), "app.X" on the App,
    # bare on its scope's widget or screen.
    action: str
    label: str  # the footer's word
    title: str  # the command palette's entry ("": none)
    help: str  # what it does
    scope: str = MAIN
    show: bool = True  # in the footer
    command: bool = True  # in the `:` line, which offers main-screen actions only


ACTIONS: tuple[Action, ...] = (
    Action(
        "enter",
        "enter",
        "shell.enter",
        "Shell",
        "Shell in the box",
        "Open a shell as agent in the box's tmux session (the dashboard steps aside)",
    ),
    Action(
        "open",
        "o",
        "shell.open_web",
        "Web",
        "Open web UI",
        "Open the box's executor URL in a browser",
    ),
    Action("new", "n", "boxes.new", "New", "New box", "Create and provision a new box"),
    Action(
        "branch",
        "b",
        "boxes.branch",
        "Branch",
        "Branch box",
        "A new box with the selected box's /data and installed state, its own name and port",
    ),
    Action(
        "start",
        "s",
        "boxes.start",
        "Start",
        "Start box",
        "Start the selected box (resume a paused one)",
    ),
    Action(
        "stop",
        "x",
        "boxes.stop",
        "Stop",
        "Stop box",
        "Quiesce and stop the selected box (asked first when an agent in it is at work)",
    ),
    Action(
        "pause",
        "z",
        "boxes.pause",
        "Pause",
        "Pause box",
        "Pause the selected box: the engine saves its RAM and disks; its processes and agents "
        "go on at resume",
        show=False,
    ),
    Action(
        "resume",
        "Z",
        "boxes.resume",
        "Resume",
        "Resume box",
        "Go on with the paused box where it was (s does too)",
        show=False,
    ),
    Action(
        "remove",
        "d",
        "boxes.remove",
        "Remove",
        "Remove box",
        "Remove the selected box after typing its name",
    ),
    Action(
        "save",
        "w",
        "archives.save",
        "Save",
        "Save box",
        "Save the selected box to an encrypted archive",
    ),
    Action("load", "l", "archives.load", "Load", "Load archive", "Make a new box from an archive"),
    Action(
        "cancel",
        "c",
        "boxes.cancel",
        "Cancel op",
        "Cancel operation",
        "Cancel the selected box's running operation; what it did is rolled back",
    ),
    # -- the agents in the boxes (docs/agents.md); in the footer once a box has an agent --
    Action(
        "next-needs-you",
        "a",
        "agents.next_needs_you",
        "Needs you",
        "Next box that needs you",
        "Select the next box whose agent waits for you (a permission, a question)",
    ),
    Action(
        "agent",
        "v",
        "agents.toggle_agent",
        "Agent",
        "Agent screen",
        "The selected box's agent screen, live, in the log's place; v again brings the log back",
    ),
    Action(
        "approve",
        "A",
        "agents.approve",
        "Approve",
        "Approve agent request",
        "Allow what the selected box's agent asks permission for",
    ),
    Action(
        "deny",
        "D",
        "agents.deny",
        "Deny",
        "Deny agent request",
        "Refuse what the selected box's agent asks permission for",
    ),
    Action(
        "send",
        "m",
        "agents.send",
        "Send",
        "Send a line to the agent",
        "Type a line into the selected box's agent (an answer, or the next prompt) and Enter",
    ),
    # The life of an agent session (in the help and the palette; the footer has no room).
    Action(
        "agent-start",
        "Y",
        "agents.start_agent",
        "New agent",
        "Start an agent in the box",
        "A new agent session in the selected box (a small dialog: which agent, its task)",
        show=False,
    ),
    Action(
        "agent-resume",
        "C",
        "agents.resume_agent",
        "Resume agent",
        "Resume the box's agent",
        "Start the selected box's most recent ended session again, with its conversation",
        show=False,
    ),
    Action(
        "agent-stop",
        "K",
        "agents.stop_agent",
        "Stop agent",
        "Stop the box's agent",
        "End an agent session of the selected box (asks first when it is working or needs you)",
        show=False,
    ),
    Action(
        "agent-forget",
        "X",
        "agents.forget_agents",
        "Forget ended",
        "Forget the box's ended agents",
        "Drop the selected box's ended agent sessions from every view",
        show=False,
    ),
    Action(
        "extract",
        "e",
        "archives.extract",
        "Extract",
        "Extract archive",
        "Unpack an archive's files into a folder",
    ),
    Action(
        "details",
        "i",
        "boxes.details",
        "Info",
        "Box details",
        "Everything about the selected box, with its live CPU and memory",
    ),
    Action(
        "forward",
        "F",
        "shell.forward",
        "Forward",
        "Forward a port",
        "Reach a port on the selected box's own loopback (a dev server) from 127.0.0.1 here, "
        "while the dashboard and the box run",
        show=False,
    ),
    # -- work in and out of boxes (docs/work.md) ------------------------------------------
    Action(
        "diff",
        "u",
        "work.diff",
        "Diff",
        "Diff of the box's work",
        "The selected box's work since its seed: changed files and the patch (new --repo)",
    ),
    Action(
        "pull",
        "P",
        "work.pull",
        "Pull",
        "Pull the box's work",
        "Fetch the box's branches into its host repository as refs/remotes/box/BOX/*",
    ),
    Action(
        "pr",
        "L",
        "work.pr",
        "PR",
        "Push the box's work and open a pull request",
        "Pull the box's work, push its branch hb/BOX to the repository's origin (your git, "
        "your credentials, never forced) and open a pull request with gh (asks first)",
        show=False,
    ),
    Action(
        "try",
        "T",
        "work.try",
        "Try",
        "Compare the try's boxes",
        "The try the selected box belongs to: each box's agent, diffstat and check; keep one",
    ),
    Action("refresh", "r", "refresh_now", "Refresh", "Refresh", "List the boxes again now"),
    Action("filter", "slash", "filter", "Filter", "Filter boxes", "Show only boxes matching words"),
    Action("sort", "S", "cycle_sort", "Sort", "Cycle sort column", "Sort by the next column"),
    Action(
        "reverse",
        "R",
        "reverse_sort",
        "Reverse",
        "Reverse sort",
        "Sort the other way round",
        show=False,
    ),
    Action(
        "mark",
        "space",
        "toggle_mark",
        "Mark",
        "Mark box",
        "Mark or unmark the selected box: start, stop, pause, resume and save act on every "
        "marked box",
        show=False,
        command=False,
    ),
    Action(
        "command",
        "colon",
        "command_line",
        "Cmd",
        "Command line",
        "Type an action and a box: ':stop web1', ':new', ':q' (tab completes)",
        show=False,
        command=False,
    ),
    Action(
        "logs",
        "t",
        "toggle_logs",
        "Logs",
        "Toggle log tab",
        "Switch between the operation log and the workload log",
    ),
    Action(
        "fullscreen",
        "f",
        "toggle_log_full",
        "Full log",
        "Full-screen log",
        "The log pane takes the whole screen, focused; f again brings the table back",
        show=False,
    ),
    Action(
        "ports",
        "p",
        "toggle_ports",
        "Ports",
        "Port allocator",
        "Show or hide the map of the port range",
    ),
    Action("help", "question_mark", "app.help", "Help", "Help", "Every key and what it does"),
    Action(
        "quit", "q", "app.quit", "Quit", "Quit", "Leave the dashboard (operations are cancelled)"
    ),
    Action(
        "clear-filter",
        "escape",
        "clear_filter",
        "Clear filter",
        "",  # esc: not worth a palette entry
        "Clear the filter and hide its box",
        show=False,
        command=False,
    ),
    # -- the box table ---------------------------------------------------------------------
    Action("up", "up,k", "cursor(-1)", "Up", "", "The box above", TABLE, show=False),
    Action("down", "down,j", "cursor(1)", "Down", "", "The box below", TABLE, show=False),
    Action("page-up", "pageup", "page(-1)", "Page up", "", "A page up", TABLE, show=False),
    Action("page-down", "pagedown", "page(1)", "Page down", "", "A page down", TABLE, show=False),
    Action(
        "first", "home,ctrl+home,g", "cursor_to(0)", "First", "", "The first box", TABLE, show=False
    ),
    Action(
        "last", "end,ctrl+end,G", "cursor_to(-1)", "Last", "", "The last box", TABLE, show=False
    ),
    # -- the log (short labels: while the log has the focus they come first in the footer) --
    Action("log-search", "slash", "start_search", "Search", "", "Search the log", LOG),
    Action("log-next", "n", "next_match(1)", "Next", "", "The next match", LOG),
    Action("log-previous", "N", "next_match(-1)", "Prev", "", "The previous match", LOG),
    Action("log-wrap", "W", "toggle_wrap", "Wrap", "", "Wrap long lines, or not", LOG),
    Action("log-error", "E", "last_error", "Error", "", "Jump to the last error", LOG),
    Action(
        "log-follow",
        "end",
        "follow",
        "Follow",
        "",
        "Jump to the end, follow again",
        LOG,
        show=False,
    ),
    Action(
        "log-clear-search",
        "escape",
        "clear_search",
        "Clear search",
        "",
        "Clear the search",
        LOG,
        show=False,
    ),
    # -- the port allocator's grid ----------------------------------------------------------
    Action("port-left", "left", "move(-1)", "", "", "The previous port", PORTS, show=False),
    Action("port-right", "right", "move(1)", "", "", "The next port", PORTS, show=False),
    Action("port-up", "up", "move_row(-1)", "", "", "The port above", PORTS, show=False),
    Action("port-down", "down", "move_row(1)", "", "", "The port below", PORTS, show=False),
    Action("port-pick", "enter", "pick", "", "", "A new box on this free port", PORTS, show=False),
    # -- the diff view and the compare view (pushed screens) ---------------------------------
    Action("diff-search", "slash", "start_search", "Search", "", "Search the patch", DIFF),
    Action("diff-next", "n", "next_match(1)", "Next", "", "The next match", DIFF),
    Action("diff-previous", "N", "next_match(-1)", "Prev", "", "The previous match", DIFF),
    Action("diff-back", "escape,u", "back", "Back", "", "Close the search, else the view", DIFF),
    Action("try-keep", "k", "keep", "Keep", "", "Pull this box's work, remove the others", TRY),
    Action("try-diff", "u", "diff", "Diff", "", "This box's diff", TRY),
    Action("try-refresh", "r", "reload", "Refresh", "", "Ask the boxes again (runs checks)", TRY),
    Action("try-back", "escape,T", "app.pop_screen", "Back", "", "Back to the boxes", TRY),
)

BY_ID = {a.id: a for a in ACTIONS}

# What `:` accepts: the main screen's commands by id, and the words k9s, vim and docker
# users type for them.
ALIASES = {
    "q": "quit",
    "shell": "enter",
    "rm": "remove",
    "delete": "remove",
    "describe": "details",
    "inspect": "details",
}
COMMANDS: dict[str, str] = {
    **{a.id: a.id for a in ACTIONS if a.scope == MAIN and a.command},
    **ALIASES,
}


def in_scope(scope: str) -> tuple[Action, ...]:
    return tuple(a for a in ACTIONS if a.scope == scope)


def default_keys() -> dict[str, str]:
    """Each id's default keys, for the `[keymap]` check."""
    return {a.id: a.keys for a in ACTIONS}


def scopes() -> dict[str, str]:
    """Each id's scope: keys clash only within one."""
    return {a.id: a.scope for a in ACTIONS}
