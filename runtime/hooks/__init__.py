"""Admin hooks: external checks of tool calls named in the policy file (`[hooks.<name>]`).
`answer` reads what a hook says, `transport` asks a command or an HTTP endpoint, `judge` asks
the hooks that apply to a call and combines their answers (strictest wins, failures ask)."""
