"""Server-rendered pages for engineers: signature list and detail, behind a token login."""
