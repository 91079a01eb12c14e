"""Scripted learners that talk to the server: personas for tests and load bots."""
