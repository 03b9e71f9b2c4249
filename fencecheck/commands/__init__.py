"""The commands of ``fencecheck``: one module per subcommand, each a plain function of (args, out) returning the exit
code, and ``main``, which parses the command line and maps every failure to one line and an exit code."""
