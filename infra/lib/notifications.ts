import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';

export interface NotificationsProps {
  /**
   * E-mail address subscribed to the alarm topic (the subscription must be confirmed).
   * @default - no subscription; subscribe a pager or chat integration yourself
   */
  readonly alarmEmail?: string;
}

const EMAIL_PATTERN = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;

/** The SNS topic every alarm and capacity error notifies. */
export class Notifications extends Construct {
  readonly topic: sns.Topic;

  constructor(scope: Construct, id: string, props: NotificationsProps = {}) {
    super(scope, id);
    if (props.alarmEmail !== undefined && !EMAIL_PATTERN.test(props.alarmEmail)) {
      throw new Error(`alarmEmail '${props.alarmEmail}' is not an e-mail address.`);
    }
    // No KMS key: alarm and scaling notifications carry no secrets, and an encrypted topic
    // needs key grants for CloudWatch and the Auto Scaling service-linked role.
    this.topic = new sns.Topic(this, 'Topic', { enforceSSL: true });
    if (props.alarmEmail) {
      this.topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
    }
  }
}
