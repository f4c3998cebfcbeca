"""The web page: see and steer memory from a browser (`rockmem-mcp ui`, or /ui/ beside streamable HTTP).

Owns: the page's routes and views and its static HTML, CSS and script (no CDN).
Imports: any room of the library, and the server's HTTP pieces it is served beside.
"""
