"""The wire: API shapes, endpoints and their clients, and how their failures read. Knows nothing of tools or loops."""
