"""The store: Redis connections and errors, the key schema, the wire format shared with Lua, the script runner,
a namespace's stored configuration, server health. May import ``frontier_rate.math`` only."""
