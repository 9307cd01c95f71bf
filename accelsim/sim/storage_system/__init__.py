"""A shared storage system read by many client hosts: its parts as capacities (`parts`), reads
as max-min fair flows over them (`fluid`), MLPerf Storage's DLIO emulation over every host
(`dlio`), the searches for the most accelerators (`sizing`, `search`) and the fewest servers
(`size`), and one training node's share as a medium (`medium`)."""
