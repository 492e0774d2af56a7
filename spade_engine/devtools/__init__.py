"""Developer and test tooling: local services the tests, benches and CI start for themselves."""
