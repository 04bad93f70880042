# Four managed compute environments (CPU/GPU x on-demand/spot), each scaling from 0 to its max_vcpus,
# and one job queue in front of each: the submitter picks the hardware and the price model by the
# queue's name. One queue per environment rather than a spot-then-on-demand queue because a Batch
# queue does not fall back when spot capacity is short: it only moves on once the first environment
# is at its max_vcpus, so a "fallback" queue would leave jobs waiting on spot while looking like it
# had on-demand behind it, and would hide which price a run paid.

locals {
  environments = {
    cpu_on_demand = { gpu = false, spot = false }
    cpu_spot      = { gpu = false, spot = true }
    gpu_on_demand = { gpu = true, spot = false }
    gpu_spot      = { gpu = true, spot = true }
  }
  # resource names: cleanrl-cpu-on-demand, cleanrl-gpu-spot, ...
  environment_names = { for k, _ in local.environments : k => "${var.name_prefix}-${replace(k, "_", "-")}" }
}

# Hardening shared by all instances: IMDSv2 only, and a hop limit of 1 so that job containers
# (bridge network) cannot reach the instance metadata service and borrow the instance role; the
# jobs get their own credentials from the job role. An encrypted, larger root volume for the images.
resource "aws_launch_template" "batch" {
  name        = "${var.name_prefix}-batch"
  description = "${var.name_prefix} AWS Batch instances"

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  # The ECS agent's settings (Batch merges a MIME multi-part user data with its own):
  # - ECS_CONTAINER_STOP_TIMEOUT: when ECS stops a job's container (a terminated job, a timed-out attempt), the
  #   time between SIGTERM and SIGKILL. A script stops after the step under way and then writes its checkpoint
  #   and pushes it to the run store; the default 30 s is too short for an off-policy script's replay memory.
  #   Spot gives two minutes' notice before an instance goes, so 120 s is the most a reclaim can use.
  # - ECS_ENABLE_SPOT_INSTANCE_DRAINING: on a spot interruption notice ECS places no new job on the instance.
  user_data = base64encode(<<-EOT
    MIME-Version: 1.0
    Content-Type: multipart/mixed; boundary="==CLEANRL=="

    --==CLEANRL==
    Content-Type: text/x-shellscript; charset="us-ascii"

    #!/bin/bash
    cat >> /etc/ecs/ecs.config <<'EOF'
    ECS_CONTAINER_STOP_TIMEOUT=${var.job_stop_timeout_seconds}s
    ECS_ENABLE_SPOT_INSTANCE_DRAINING=true
    EOF

    --==CLEANRL==--
  EOT
  )

  block_device_mappings {
    device_name = "/dev/xvda" # root device of the ECS-optimized Amazon Linux 2023 AMIs
    ebs {
      volume_size           = var.root_volume_size_gib
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }
}

resource "aws_batch_compute_environment" "this" {
  for_each = local.environments

  compute_environment_name = local.environment_names[each.key]
  type                     = "MANAGED"
  service_role             = aws_iam_role.batch_service.arn

  compute_resources {
    type = each.value.spot ? "SPOT" : "EC2"
    # spot: pools that are both likely to last and cheap; on-demand: the best fitting types first.
    allocation_strategy = each.value.spot ? "SPOT_PRICE_CAPACITY_OPTIMIZED" : "BEST_FIT_PROGRESSIVE"
    bid_percentage      = each.value.spot ? var.spot_bid_percentage : null

    min_vcpus     = 0 # nothing runs, nothing is paid for, while the queue is empty
    max_vcpus     = var.max_vcpus[each.key]
    instance_type = each.value.gpu ? var.gpu_instance_types : var.cpu_instance_types

    subnets            = var.subnet_ids
    security_group_ids = var.security_group_ids
    instance_role      = aws_iam_instance_profile.ecs_instance.arn

    ec2_configuration {
      # the NVIDIA variant carries the driver and the container toolkit
      image_type = each.value.gpu ? "ECS_AL2023_NVIDIA" : "ECS_AL2023"
    }

    # "$Latest" rather than the version number: a number would change with every edit of the template
    # (root_volume_size_gib) and force Terraform to replace all four environments, which AWS refuses
    # while their queues use them. Batch resolves "$Latest" when it creates an environment and on an
    # infrastructure update, so a changed template reaches instances launched after such an update.
    launch_template {
      launch_template_id = aws_launch_template.batch.id
      version            = "$Latest"
    }

    tags = { Name = local.environment_names[each.key] }
  }

  # Batch needs its role's permissions while it creates and deletes the environment.
  depends_on = [aws_iam_role_policy_attachment.batch_service]
}

resource "aws_batch_job_queue" "this" {
  for_each = local.environments

  name     = local.environment_names[each.key]
  state    = "ENABLED"
  priority = 1

  compute_environment_order {
    order               = 1
    compute_environment = aws_batch_compute_environment.this[each.key].arn
  }
}

# One job definition for all four queues: the image of this stack's repository, the default
# resources (a submission overrides vCPU/memory/GPU and the command per job), the W&B key by
# reference only.
locals {
  resource_requirements = concat(
    [
      { type = "VCPU", value = tostring(var.job_vcpus) },
      { type = "MEMORY", value = tostring(var.job_memory_mib) },
    ],
    var.job_gpus > 0 ? [{ type = "GPU", value = tostring(var.job_gpus) }] : [],
  )

  container_properties = merge(
    {
      image                = "${aws_ecr_repository.this.repository_url}:${var.image_tag}"
      command              = var.job_command
      jobRoleArn           = aws_iam_role.job.arn
      executionRoleArn     = aws_iam_role.job_execution.arn
      resourceRequirements = local.resource_requirements
      secrets = [
        { name = "WANDB_API_KEY", valueFrom = var.wandb_api_key_arn },
      ]
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          "awslogs-group"         = aws_cloudwatch_log_group.jobs.name
          "awslogs-region"        = var.region
          "awslogs-stream-prefix" = var.name_prefix
        }
      }
    },
    {
      environment = [for k in sort(keys(local.job_environment)) : { name = k, value = local.job_environment[k] }]
    },
  )
  # The region, for the run store's S3 client and any AWS call of a script (the containers cannot reach the
  # instance metadata that would tell it); job_environment may override it.
  job_environment = merge({ AWS_DEFAULT_REGION = var.region }, var.job_environment)
}

resource "aws_batch_job_definition" "this" {
  name                  = var.name_prefix
  type                  = "container"
  platform_capabilities = ["EC2"]
  propagate_tags        = true # the stack's tags reach the ECS tasks (cost allocation)

  container_properties = jsonencode(local.container_properties)

  timeout {
    attempt_duration_seconds = var.job_timeout_seconds
  }

  retry_strategy {
    attempts = var.job_attempts
    # Retry only what the script did not cause: the instance went away (spot reclaim, host failure).
    evaluate_on_exit {
      on_status_reason = "Host EC2*"
      action           = "RETRY"
    }
    # A script stopped by SIGTERM exits 143 after writing its checkpoint. Batch does not retry jobs it terminated
    # itself (submit cancel, a timed-out attempt), so a 143 that reaches this rule came from the instance shutting
    # down (a reclaim) before Batch recorded the host as gone: the next attempt goes on from the checkpoint.
    evaluate_on_exit {
      on_exit_code = "143"
      action       = "RETRY"
    }
    # Anything else (a crash, a bad argument) fails the job at once rather than running it again.
    evaluate_on_exit {
      on_reason = "*"
      action    = "EXIT"
    }
  }
}
