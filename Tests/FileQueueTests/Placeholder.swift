// Placeholder until this module's tests are written.
