"""Stack unwinding: the sans-IO unwinder core, and beside it the adapters that feed it
(live processes through ptrace, core files, module discovery)."""
