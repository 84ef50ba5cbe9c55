"""The tool middleware chain (`chain`), its links (`tool_policy`, `approval`) and the one
order every composition root uses (`default_chain`)."""
