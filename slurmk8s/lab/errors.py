"""Errors raised by the pod lab."""


class LabError(Exception):
    """The lab cannot run or a lab step failed; the message is meant for a person."""
