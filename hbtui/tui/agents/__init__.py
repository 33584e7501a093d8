"""What the boxes' agents do: the agent panel (the Agent column's data, the needs-you queue,
the live preview), asking and watching the boxes, answering them, the alerts."""
