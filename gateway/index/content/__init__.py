"""The content index: which files of a local checkout can hold a match, so rg reads only those."""
