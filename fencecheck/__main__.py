from fencecheck.commands.main import run

run()
