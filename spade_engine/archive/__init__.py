"""archive subpackage (see DESIGN.md)."""
