from rockmem_mcp.cli import program

program()
