"""The documentation site's pages made from the code: never written by hand."""
