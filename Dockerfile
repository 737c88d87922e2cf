# One image for every intake process; the service's command picks the role
# (node bin/intake.js gateway | worker | migrate | dashboard, as the npm scripts run them).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json prisma.config.ts ./
COPY scripts ./scripts
COPY prisma ./prisma
# The lock file is written by npm 11; the npm 10 of node:20 images refuses it.
RUN npm install -g npm@11.19.1 && npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY cli ./cli
COPY common ./common
COPY gateway ./gateway
COPY workers ./workers
USER node
# gateway (PORT), dashboard (DASHBOARD_PORT), worker metrics (WORKER_METRICS_PORT)
EXPOSE 3000 3001 9100
# node itself as the command (not npm): SIGTERM must reach the process that drains.
CMD ["node", "bin/intake.js", "gateway"]
