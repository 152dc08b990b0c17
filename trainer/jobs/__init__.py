"""A job of the training sidecar: the sidecar's settings (settings, refresh_settings: every
job reads them), the pieces of a job (domain_job: backbone, data, module training), the
quality gate (gate), and a new domain's job from claim to publication (pipeline). The
refresh job (trainer/corrections/) builds on these pieces; the loop that runs both kinds
is trainer/sidecar/."""
