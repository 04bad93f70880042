# Four roles, each with the least it needs:
#   batch_service  - AWS Batch managing the compute environments (AWS-managed AWSBatchServiceRole)
#   ecs_instance   - the EC2 instances' ECS agent (AWS-managed AmazonEC2ContainerServiceforEC2Role)
#   job_execution  - ECS starting a job: read the one W&B secret, pull the one image, write the one log group
#   job            - the training code itself: its run folders in the run store (storage.tf), and what
#                    job_role_policy_arns adds
# No spot fleet role: the spot environments use SPOT_PRICE_CAPACITY_OPTIMIZED, which needs none
# (only the BEST_FIT strategy does).

locals {
  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id

  # Secrets Manager secret or SSM parameter: the one action that reads it.
  wandb_secret_is_ssm  = can(regex("^arn:[^:]+:ssm:", var.wandb_api_key_arn))
  wandb_secret_action  = local.wandb_secret_is_ssm ? "ssm:GetParameters" : "secretsmanager:GetSecretValue"
  wandb_secret_service = local.wandb_secret_is_ssm ? "ssm" : "secretsmanager"
}

# ---------------------------------------------------------------- Batch service role

resource "aws_iam_role" "batch_service" {
  name        = "${var.name_prefix}-batch-service"
  description = "AWS Batch manages the ${var.name_prefix} compute environments"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "batch.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "batch_service" {
  role       = aws_iam_role.batch_service.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AWSBatchServiceRole"
}

# ---------------------------------------------------------------- ECS instance role and profile

resource "aws_iam_role" "ecs_instance" {
  name        = "${var.name_prefix}-ecs-instance"
  description = "ECS agent on the ${var.name_prefix} Batch instances"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "ecs_instance" {
  role       = aws_iam_role.ecs_instance.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"
}

resource "aws_iam_instance_profile" "ecs_instance" {
  name = "${var.name_prefix}-ecs-instance"
  role = aws_iam_role.ecs_instance.name
}

# ---------------------------------------------------------------- job execution role

locals {
  ecs_tasks_trust = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ecs-tasks.amazonaws.com" }
      Action    = "sts:AssumeRole"
      # confused-deputy guard: only ECS acting for this account may assume it
      Condition = { StringEquals = { "aws:SourceAccount" = local.account_id } }
    }]
  })
}

resource "aws_iam_role" "job_execution" {
  name               = "${var.name_prefix}-job-execution"
  description        = "ECS starts ${var.name_prefix} Batch jobs: reads the W&B secret, pulls the image, writes the log group"
  assume_role_policy = local.ecs_tasks_trust
}

resource "aws_iam_role_policy" "job_execution" {
  name = "${var.name_prefix}-job-execution"
  role = aws_iam_role.job_execution.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat(
      [
        {
          Sid      = "ReadWandbApiKey"
          Effect   = "Allow"
          Action   = [local.wandb_secret_action]
          Resource = [var.wandb_api_key_arn]
        },
        {
          Sid      = "PullJobImage"
          Effect   = "Allow"
          Action   = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
          Resource = [aws_ecr_repository.this.arn]
        },
        {
          # GetAuthorizationToken cannot be scoped to a resource; the token alone opens no repository.
          Sid      = "EcrLogin"
          Effect   = "Allow"
          Action   = ["ecr:GetAuthorizationToken"]
          Resource = ["*"]
        },
        {
          Sid      = "WriteJobLogs"
          Effect   = "Allow"
          Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
          Resource = ["${aws_cloudwatch_log_group.jobs.arn}:log-stream:*"]
        },
      ],
      var.wandb_api_key_kms_key_arn == null ? [] : [
        {
          Sid      = "DecryptWandbApiKey"
          Effect   = "Allow"
          Action   = ["kms:Decrypt"]
          Resource = [var.wandb_api_key_kms_key_arn]
          Condition = {
            StringEquals = { "kms:ViaService" = "${local.wandb_secret_service}.${var.region}.amazonaws.com" }
          }
        },
      ],
    )
  })
}

# ---------------------------------------------------------------- job role

resource "aws_iam_role" "job" {
  name               = "${var.name_prefix}-job"
  description        = "Identity of the ${var.name_prefix} training code: reads and writes its run folders in the run store"
  assume_role_policy = local.ecs_tasks_trust
}

resource "aws_iam_role_policy_attachment" "job" {
  for_each   = var.job_role_policy_arns
  role       = aws_iam_role.job.name
  policy_arn = each.value
}
