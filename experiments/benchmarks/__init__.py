"""Benchmarks: experiments that time dpaudit and the baseline a user would otherwise use in
the same run and print JSON with the ratios."""
