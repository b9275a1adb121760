"""Reading rows back: views and logs, where a fork's events live, the catalogue, browsing,
the resume check, and the change feeds."""
