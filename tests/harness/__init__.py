"""The one harness of the system checks: a private stack of the real executables on loopback ports
(`stack`), plain HTTP to it (`net`), soft checks that count what passed (`checks`) and the
registry's Redis layout (`registry_keys`). The pytest modules of tests/system and the chaos suite
import it; nothing here knows any one check."""
