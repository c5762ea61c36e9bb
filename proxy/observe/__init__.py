"""What taplog tells its operator: Prometheus metrics and taplog's own log lines, both fed
from recorded events on the writer thread."""
