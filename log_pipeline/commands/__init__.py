"""The log pipeline's `tokenpulse` subcommands: `shipper`, `samples`, `es`."""
