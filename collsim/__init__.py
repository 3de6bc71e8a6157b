"""collsim: discrete-event simulation of collective communication on GPU clusters."""

__version__ = "0.1.0"
