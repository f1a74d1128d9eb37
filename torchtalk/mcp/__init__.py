"""TorchTalk's MCP server: the facts and queries as tools for coding agents.

`server` builds the `MCPServer` and its lifespan, `tools` holds one typed
function per tool (TOOL_NAMES), `answer` renders compact text plus structured
output, `db` keeps the read-only fact DB and the background index, `status`
answers get_status, `cursor` writes a Cursor project's .cursor/mcp.json.
Importing this package imports nothing heavy; `server` and `tools` import mcp.
"""
