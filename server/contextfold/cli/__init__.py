"""The command line: parsing and dispatch, what commands print, and each command's handler."""
