# Read by the submission tool (`terraform output -json`): queue names by key, the job definition, the
# repository to push to, the log group to read.

output "region" {
  description = "Region the stack lives in."
  value       = var.region
}

output "job_queues" {
  description = "Job queue name and ARN per compute environment: cpu_on_demand, cpu_spot, gpu_on_demand, gpu_spot."
  value = {
    for k, q in aws_batch_job_queue.this : k => {
      name = q.name
      arn  = q.arn
      gpu  = local.environments[k].gpu
      spot = local.environments[k].spot
    }
  }
}

output "job_queue_names" {
  description = "Job queue name per compute environment."
  value       = { for k, q in aws_batch_job_queue.this : k => q.name }
}

output "job_queue_arns" {
  description = "Job queue ARN per compute environment."
  value       = { for k, q in aws_batch_job_queue.this : k => q.arn }
}

output "job_definition_name" {
  description = "Name of the job definition (submitting by name uses its latest active revision)."
  value       = aws_batch_job_definition.this.name
}

output "job_definition_arn" {
  description = "ARN of the job definition revision this apply registered."
  value       = aws_batch_job_definition.this.arn
}

output "ecr_repository_url" {
  description = "Repository to push the job image to (REGISTRY/NAME; append :TAG)."
  value       = aws_ecr_repository.this.repository_url
}

output "ecr_repository_name" {
  description = "Name of the ECR repository."
  value       = aws_ecr_repository.this.name
}

output "image" {
  description = "Image (with tag) the job definition runs."
  value       = local.container_properties.image
}

output "log_group_name" {
  description = "CloudWatch log group of the jobs' output (streams are PREFIX/default/TASK_ID)."
  value       = aws_cloudwatch_log_group.jobs.name
}

output "run_store" {
  description = "Where jobs keep their run folders across attempts (CLEANRL_RUN_STORE; the submission tool sets it): s3://BUCKET/runs, with a folder per job id."
  value       = "s3://${aws_s3_bucket.runs.id}/${local.run_store_prefix}"
}

output "run_store_bucket" {
  description = "Name of the run store's S3 bucket."
  value       = aws_s3_bucket.runs.id
}
