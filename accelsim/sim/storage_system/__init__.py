"""A shared storage system read by many client hosts: its parts (`parts`), their sharing
(`fluid`), and MLPerf Storage's DLIO emulation over it (`dlio`, `sizing`)."""
