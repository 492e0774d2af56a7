"""dashboard subpackage (see DESIGN.md)."""
