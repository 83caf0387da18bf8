"""The fields of `shared.config.Settings`, one module per concern, each a pydantic model that
`Settings` inherits. Import `Settings` (and `ApiKey`) from `shared.config`; these modules only
declare fields, their descriptions (docs/configuration.md is generated from them) and the
validators of their own fields."""
