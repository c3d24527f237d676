"""The demo world: a simulated fleet with crash populations of known cause (`simulator`), fed
to a registry through its HTTP API (`feed`), and `crashreg demo` (`command`), which serves the
whole application and shows the epidemiology off. Tests and benches use the first two."""
