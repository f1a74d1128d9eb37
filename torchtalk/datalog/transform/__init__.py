"""Program transforms: one module per pass, each exporting one function of
the same name that takes a Program and returns a Program."""
