"""TorchTalk: Datalog code intelligence for the PyTorch source tree."""

__version__ = "0.1.0"
