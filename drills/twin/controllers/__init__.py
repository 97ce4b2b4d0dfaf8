"""The twin's controllers: they act only through the API server over HTTP, like real controllers
(kwok-style), never by reaching into the store."""
