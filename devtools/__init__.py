"""Development tooling kept out of the production wheel: a throwaway PostgreSQL (localpg) for
tests, benchmarks and `make dev` (dev). Imported from the repository's root, like tests and bench."""
