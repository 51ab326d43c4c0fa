"""The query language in one room: the syntax users type (SPEC §7), the request (SPEC §2), the criteria
both are read into, path globs, languages, and the filters applied to what came back."""
