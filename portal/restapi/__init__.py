"""The API's shared plumbing, beneath every app's API: strict input, the one error handler,
keyset pagination, the schema's error responses, the old paths' redirects."""
