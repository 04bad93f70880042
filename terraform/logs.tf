# Where the jobs' stdout and stderr go (the awslogs driver of the job definition).
resource "aws_cloudwatch_log_group" "jobs" {
  #checkov:skip=CKV_AWS_158:Training logs hold no secrets (the W&B key reaches the job as an environment variable, never printed); CloudWatch Logs encrypts them at rest with its own key, and a customer-managed key would cost a monthly fee and a key policy to maintain.
  #checkov:skip=CKV_AWS_338:Job logs are for debugging runs, kept log_retention_days (30 by default); metrics and results live in W&B and TensorBoard. A year of retention would only add cost.
  name              = "/aws/batch/${var.name_prefix}"
  retention_in_days = var.log_retention_days
}
