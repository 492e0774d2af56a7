"""consumers subpackage (see DESIGN.md)."""
