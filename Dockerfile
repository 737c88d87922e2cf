# syntax=docker/dockerfile:1
# One image for every intake process; the service's command picks the role
# (node bin/intake.js gateway | worker | migrate | dashboard, as the npm scripts run them).
# Stages: `build` compiles the TypeScript with the dev dependencies, `deps` installs the
# production dependencies, and the image itself holds only those, the compiled code (dist/),
# bin/ and prisma/ (the migrations `intake migrate` applies). test/ops/dockerfile.test.ts
# checks this file (there is no Docker engine where the tests run).

# Node.js 24, the maintained LTS line the CI runs beside this machine's (package.json engines).
# Its npm 11 reads the lock file npm 11 writes; the image keeps the base's npm untouched.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json prisma.config.ts tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY prisma ./prisma
# Dependencies before the sources, so a source change reuses this layer. No install scripts:
# the postinstall build needs the sources; the Prisma client is generated here explicitly.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts --no-audit --no-fund && node scripts/generate-client.js
COPY bin ./bin
COPY cli ./cli
COPY platform ./platform
COPY environments ./environments
COPY profiles ./profiles
COPY privacy ./privacy
COPY events ./events
COPY identify ./identify
COPY journeys ./journeys
COPY gateway ./gateway
COPY workers ./workers
COPY clients/typescript/src ./clients/typescript/src
RUN npm run build

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only. --legacy-peer-deps leaves out @prisma/client's optional peers
# (the prisma CLI and TypeScript, with theirs about 250 MB that the compiled code never loads);
# no install script is needed (msgpackr-extract's native build comes prebuilt as a package).
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --legacy-peer-deps --ignore-scripts --no-audit --no-fund

FROM node:24-bookworm-slim AS runtime
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY prisma ./prisma
# Files stay root's: the processes read them and write nothing here.
USER node
# gateway (PORT), dashboard (DASHBOARD_PORT), worker metrics (WORKER_METRICS_PORT)
EXPOSE 3000 3001 9100
# For the default role, the gateway: ready = it answers and reaches Redis and PostgreSQL
# (GET /readyz). Other roles bring their own check (docker-compose.yml: the worker's BullMQ
# connection, the dashboard's /healthz), which replaces this one.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node itself as the command (not npm): SIGTERM must reach the process that drains.
CMD ["node", "bin/intake.js", "gateway"]
