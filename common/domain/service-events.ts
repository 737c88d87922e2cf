// The service's own events: written to the outbox by Identify, consumed by the journey engine,
// and reserved names that Track refuses.
export const SERVICE_EVENTS = {
  profileFieldsChanged: 'profile_fields_changed',
  subscriptionChanged: 'subscription_changed',
} as const;
