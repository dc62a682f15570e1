"""The service: a tenant's capabilities over one scope, and the pipelines around the store."""
