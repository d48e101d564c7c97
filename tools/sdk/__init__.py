"""The generated Python SDK's models, from the API's OpenAPI document."""
