"""engine subpackage (see DESIGN.md)."""
