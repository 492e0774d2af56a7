"""trainer subpackage (see DESIGN.md)."""
